// How the study store writes trials as text: state names and parameters as typed JSON. Offers the
// conversions only; it does not read or write files.
#pragma once
#include <optional>
#include <string>

#include "hwtrain/sweep/trial.h"

namespace hwt::sweep {

// "running", "complete", "pruned", "failed", "interrupted": the names stored in the database.
const char* trial_state_name(TrialState state);
// The state named `name`, or nullopt for any other string.
std::optional<TrialState> parse_trial_state(const std::string& name);

// Parameters as the JSON stored in the trials table: {"key": {"real": 0.1}}, {"key": {"int": 3}},
// {"key": {"str": "bf16"}}, so each value keeps its alternative (an int 3 never becomes 3.0) and a
// real comes back bit-identical (shortest round-trip digits, -0.0 and subnormals included).
// Throws ConfigError for a non-finite real (JSON has no such number; no space samples one) or a
// string that is not UTF-8.
std::string params_to_json(const Params& params);
// The inverse; throws IoError, naming `where`, when `json` is not such an object.
Params params_from_json(const std::string& json, const std::string& where);

}  // namespace hwt::sweep
