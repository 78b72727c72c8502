/// @file cudax.hpp
/// @brief The umbrella header: includes every public cudax header.
#pragma once

#include "cudax/context.hpp"
#include "cudax/copy.hpp"
#include "cudax/device.hpp"
#include "cudax/device_buffer.hpp"
#include "cudax/driver.hpp"
#include "cudax/error.hpp"
#include "cudax/event.hpp"
#include "cudax/host_registration.hpp"
#include "cudax/managed_buffer.hpp"
#include "cudax/memory_pool.hpp"
#include "cudax/pinned_buffer.hpp"
#include "cudax/pitched_buffer.hpp"
#include "cudax/pointer_attributes.hpp"
#include "cudax/span.hpp"
#include "cudax/stream.hpp"
