// The nn building blocks in one include: Module, layers, activations, Sequential, init.
#pragma once

#include "nn/activation.h"
#include "nn/conv.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/sequential.h"
