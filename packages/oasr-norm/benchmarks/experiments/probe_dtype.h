// The element type of the experiments built once per dtype: -DDTYPE=0 half, 1 bf16.
#pragma once

#include "oasr/common/types.h"

#if DTYPE == 0
using T = oasr::half;
static const char* kDtype = "fp16";
#else
using T = oasr::bfloat16;
static const char* kDtype = "bf16";
#endif
