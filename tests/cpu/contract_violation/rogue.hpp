// A header for the cudrv_contract_list_refuses_unlisted_owner test: it declares an owner adopting a
// handle and another handing one off, neither of them in tests/cpu/test_contract.cpp's list.
#pragma once

namespace cudrv {

class rogue_owner {
 public:
  [[nodiscard]] static rogue_owner from_native_handle(int handle) noexcept;
};

class rogue_releaser {
 public:
  [[nodiscard]] int release() noexcept;
};

}  // namespace cudrv
