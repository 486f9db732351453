// Not the upstream file: cudnn-frontend's bundled copy of nlohmann/json is replaced by the
// system's (found by CMake as nlohmann_json, as the rest of the library uses it).
#pragma once
#include <nlohmann/json.hpp>
