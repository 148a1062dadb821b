// Machines for the multi-machine tests: one network namespace per machine, all on one bridge (in
// the first machine's namespace) with an address each in 10.233.S.0/24, so each reaches the others
// by address and nobody reaches another's loopback. Everything is removed by the destructor.
// Needs root and iproute2; `error` says why when it could not be set up.
#pragma once
#include <string>
#include <vector>

namespace stoa::integration {

class Machines {
 public:
  // `names`: one namespace each (the first holds the bridge).
  explicit Machines(const std::vector<std::string>& names);
  ~Machines();
  Machines(const Machines&) = delete;
  Machines& operator=(const Machines&) = delete;

  const std::string& ns(size_t i) const { return namespaces_.at(i); }
  const std::string& ip(size_t i) const { return addresses_.at(i); }
  std::string error;

 private:
  void remove();
  std::vector<std::string> namespaces_, addresses_;
};

}  // namespace stoa::integration
