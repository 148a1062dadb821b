# Debian packages with CPack (scripts/package builds them into build/packages/).
#
# One build tree makes one package: the `worker` preset (no libtorch) makes `stoa-worker`, a tree
# with the trainer makes `stoa` (trainer, hub, demo and the worker too). Both install /usr/bin/stoa,
# so they conflict with each other; a volunteer installs stoa-worker, an operator stoa.
# dpkg-shlibdeps reads the binary's shared-library needs and writes the Depends line, so
# `apt install ./stoa-worker_*.deb` pulls exactly the Debian packages the binary links against
# (the worker's list holds no libtorch — tests/packaging checks that).
include(GNUInstallDirs)

install(TARGETS stoa RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
if(STOA_WITH_TORCH)
  # The demo's committed warm start (app/demo: looked up beside the sources, then here).
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/assets/warm-start
          DESTINATION ${CMAKE_INSTALL_DATADIR}/stoa)
  set(stoa_package_name stoa)
  set(stoa_package_other stoa-worker)
  set(stoa_package_summary "RL post-training with int8 volunteer workers: trainer, hub and worker")
  # libtorch runs its CPU kernels on BLAS; the pthread OpenBLAS is the fast one (scripts/setup).
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS libopenblas0-pthread)
else()
  set(stoa_package_name stoa-worker)
  set(stoa_package_other stoa)
  set(stoa_package_summary "Stoa rollout worker: joins a Stoa hub and generates rollouts on CPU")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ${stoa_package_name})
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Stoa developers <stoa@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY ${stoa_package_summary})
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_SOURCE_DIR}/build/packages)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONFLICTS ${stoa_package_other})
set(CPACK_DEBIAN_PACKAGE_REPLACES ${stoa_package_other})
set(CPACK_STRIP_FILES ON)
include(CPack)
