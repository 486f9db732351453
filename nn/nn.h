// The nn building blocks in one include: Module, layers, activations, norms, pools, containers, init,
// gradient clipping (nn::utils).
#pragma once

#include "nn/activation.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/norm.h"
#include "nn/pool.h"
#include "nn/rnn.h"
#include "nn/sequential.h"
#include "nn/transformer/attention.h"
#include "nn/transformer/gpt.h"
#include "nn/transformer/transformer.h"
#include "nn/utils/clip_grad.h"
