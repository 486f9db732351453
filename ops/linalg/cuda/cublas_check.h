// Error checking for cuBLAS and cuBLASLt calls (host code that includes cuBLAS headers).
#pragma once

#include <cublas_v2.h>

#include "tensor/check.h"

// Throws tg::Error naming the failed cuBLAS call and its status.
#define TG_CUBLAS_CHECK(expr)                                                                      \
  do {                                                                                             \
    cublasStatus_t tg_status_ = (expr);                                                            \
    if (tg_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                                        \
      TG_FAIL("[cublas] ", #expr, " failed: ", cublasGetStatusName(tg_status_), ": ",               \
              cublasGetStatusString(tg_status_));                                                  \
    }                                                                                              \
  } while (0)
