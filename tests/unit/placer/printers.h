#pragma once
// GoogleTest printers for unit types, so that failures show "72.0 ms" rather than raw bytes.

#include <ostream>

#include "nest/core/unit_parse.h"
#include "nest/core/units.h"

namespace nest {

inline void PrintTo(Time t, std::ostream* os) { *os << t.ps() << " ps (" << format_time(t) << ")"; }
inline void PrintTo(Bytes b, std::ostream* os) {
  *os << b.count() << " B (" << format_bytes(b) << ")";
}

}  // namespace nest
