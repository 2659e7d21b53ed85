//===- Schedule.cpp - Learning-rate schedules with warm-up ----------------===//
//
// transformers' get_{constant,cosine,linear}_schedule_with_warmup multipliers
// as LambdaLR applies them (base_lr * lambda(step)), written in the same
// order of double operations as optimization.py so that each lr is the same
// double.
//
//===----------------------------------------------------------------------===//

#include "moert/Train.h"

#include <algorithm>
#include <cmath>

using namespace moert::train;

static double multiplier(const Schedule &s, int64_t step) {
  if (step < s.warmupSteps)
    return static_cast<double>(step) /
           static_cast<double>(std::max<int64_t>(1, s.warmupSteps));
  if (s.kind == ScheduleKind::Constant)
    return 1.0;
  double span =
      static_cast<double>(std::max<int64_t>(1, s.totalSteps - s.warmupSteps));
  double m;
  if (s.kind == ScheduleKind::Linear) {
    m = static_cast<double>(s.totalSteps - step) / span;
  } else {
    // num_cycles = 0.5: math.pi * float(num_cycles) * 2.0 * progress.
    double progress = static_cast<double>(step - s.warmupSteps) / span;
    m = 0.5 * (1.0 + std::cos(M_PI * 0.5 * 2.0 * progress));
  }
  return m > 0.0 ? m : 0.0; // Python's max(0.0, m)
}

double Schedule::lrAt(double baseLr, int64_t step) const {
  return baseLr * multiplier(*this, step);
}

std::string moert::train::validate(const Schedule &s) {
  if (s.warmupSteps < 0 || s.totalSteps < 0)
    return "schedule step counts must not be negative";
  return "";
}

const char *moert::train::name(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::Constant:
    return "constant";
  case ScheduleKind::Cosine:
    return "cosine";
  case ScheduleKind::Linear:
    return "linear";
  }
  return "";
}

bool moert::train::parse(const std::string &text, ScheduleKind &kind) {
  for (ScheduleKind k :
       {ScheduleKind::Constant, ScheduleKind::Cosine, ScheduleKind::Linear})
    if (text == name(k))
      return kind = k, true;
  return false;
}
