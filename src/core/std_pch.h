// The C++ standard headers most of the engine's files include, compiled once
// per target as a precompiled header (meson's cpp_pch on libdp_engine and
// libdp): parsing them was a third of each file's compile. Only standard
// headers belong here, so that a file that forgets an include of dp's own
// still fails to compile.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>
