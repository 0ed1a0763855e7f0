// Numbers as text for the torch glue's error messages (torch_glue.cpp, decode_glue.cpp).
//
// Error messages get numbers as strings made here, never as integers streamed into
// TORCH_CHECK's ostringstream: with the torch 2.11 wheel and the image's g++ on our
// H100/H200 machines, an integer streamed from inside an extension crashed the process
// (a libstdc++ mismatch in ostream::_M_insert<long>, seen in cuda-gdb); strings are safe.
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace glue_text {

inline std::string fmt(int64_t value) { return std::to_string(value); }

inline std::string fmt(c10::IntArrayRef values) {
  std::string text = "(";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + ")";
}

}  // namespace glue_text
