#pragma once
// The doctor's report as a table (one line per check: verdict, name, reason, fix) or as JSON.
#include <string>

#include "doctor/check.h"

namespace eaglet::doctor {

std::string report_table(const Report& report);
nlohmann::json report_json(const Report& report);

}  // namespace eaglet::doctor
