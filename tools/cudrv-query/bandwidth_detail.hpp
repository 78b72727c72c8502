// cudrv-query --bandwidth: internals shared by bandwidth.cpp and the tests.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace cudrv_query {
struct bandwidth_results;
}

namespace cudrv_query::detail {

/// The "bandwidth" object of the JSON document (docs/cudrv-query.schema.json).
[[nodiscard]] nlohmann::ordered_json bandwidth_to_json(const bandwidth_results& r);

/// The PTX of the view's kernels (bandwidth_kernels.cpp describes each).
[[nodiscard]] std::string bandwidth_kernels_ptx();

}  // namespace cudrv_query::detail
