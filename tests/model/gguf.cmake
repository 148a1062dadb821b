# GGUF writer/reader: round trips and llama.cpp naming (unit), bad input (fault: also under
# ASan/UBSan, so it must stay fast).
stoa_test(test_gguf
  SOURCES gguf_roundtrip_test.cpp
  LIBS stoa_model
  LABELS unit)
stoa_test(test_gguf_fault
  SOURCES gguf_fault_test.cpp
  LIBS stoa_model
  LABELS unit fault
  TIMEOUT 120)
if(TARGET stoa_engine)
  stoa_test(test_gguf_int8_policy
    SOURCES gguf_int8_policy_test.cpp
    LIBS stoa_engine stoa_model
    LABELS unit)
endif()
# The precision plan (int8 grid / bf16 / f32 carriers) over every preset's tensor list.
stoa_test(test_precision_plan
  SOURCES precision_plan_test.cpp
  LIBS stoa_model
  LABELS unit)
