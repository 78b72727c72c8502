// The plain-value helpers of the virtual memory types (their compile-time properties are checked in
// test_types.cpp). Nothing here calls the driver.
#include <catch2/catch.hpp>

#include <cudrv/virtual_memory.hpp>

TEST_CASE("virtual memory value types map to the driver's constants", "[vmm]") {
  const cudrv::device dev = cudrv::device::from_native_handle(3);
  const cudrv::physical_location on = cudrv::physical_location::on(dev);
  CHECK(on.native().type == CU_MEM_LOCATION_TYPE_DEVICE);
  CHECK(on.native().id == 3);
  CHECK(cudrv::physical_location::host().native().type == CU_MEM_LOCATION_TYPE_HOST);
  CHECK(cudrv::physical_location::host_numa(1).native().type == CU_MEM_LOCATION_TYPE_HOST_NUMA);
  CHECK(cudrv::physical_location::host_numa(1).native().id == 1);
  CHECK(on == cudrv::physical_location{CU_MEM_LOCATION_TYPE_DEVICE, 3});
  CHECK_FALSE(on == cudrv::physical_location::host());
  CHECK(cudrv::physical_location{}.type == CU_MEM_LOCATION_TYPE_INVALID);  // no default device

  const auto both = cudrv::shareable_handle_types::posix_fd | cudrv::shareable_handle_types::fabric;
  CHECK(static_cast<unsigned>(both) == (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC));
  CHECK((both & cudrv::shareable_handle_types::fabric) == cudrv::shareable_handle_types::fabric);
  CHECK((cudrv::shareable_handle_types::posix_fd & cudrv::shareable_handle_types::fabric) ==
        cudrv::shareable_handle_types::none);

  CHECK(static_cast<int>(cudrv::access_rights::read_only) == CU_MEM_ACCESS_FLAGS_PROT_READ);
  CHECK(static_cast<int>(cudrv::access_rights::read_write) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  const cudrv::access_descriptor a = cudrv::access_descriptor::for_device(dev, cudrv::access_rights::read_only);
  CHECK(a.location == on);
  CHECK(a.rights == cudrv::access_rights::read_only);

  const auto props = cudrv::physical_allocation_properties::on(dev);
  CHECK(props.location == on);
  CHECK(props.handle_types == cudrv::shareable_handle_types::none);
  CHECK_FALSE(props.compression);
  CHECK_FALSE(props.gpu_direct_rdma);

  // Views of raw handles, and empty owners, need no driver.
  const cudrv::address_range_ref r = cudrv::address_range_ref::from_native_handle(0x1000000, 1 << 21);
  CHECK(r.address() == 0x1000000);
  CHECK(r.size() == std::size_t{1} << 21);
  CHECK(r.mapping_count() == 0);
  cudrv::address_range empty;
  CHECK_FALSE(empty);
  cudrv::file_descriptor none;
  CHECK_FALSE(none);
  CHECK(none.native_handle() == -1);
}
