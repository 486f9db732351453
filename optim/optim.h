// The optimizers in one include.
#pragma once

#include "optim/adam.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
#include "optim/compiled_step.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/lr_schedulers.h"
#include "optim/sequential_lr.h"
