// The base config a study's trials ran with, as the study records it (sweep/study_store.h): the
// settings of sweep.base_config rendered by toml++ (comments and layout dropped, keys in order), so
// that a resumed sweep whose base file now says something else is refused by the setting that changed.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace hwt::sweep {

// The recorded form of the train config `file` ("" for no file), without the `ignored` keys (the
// space's, and those the sweep sets for every trial: no trial reads their base values). Throws
// ConfigError naming the file and position when it is not TOML.
std::string recorded_base_config(const std::filesystem::path& file, const std::vector<std::string>& ignored = {});

// The first setting (in key order) in which two recorded configs differ, e.g.
// "train.lr = 0.001 in the study, 0.002 now" or "train.seed = 3 in the study, unset now"; "" if none.
std::string first_base_difference(const std::string& in_study, const std::string& now);

}  // namespace hwt::sweep
