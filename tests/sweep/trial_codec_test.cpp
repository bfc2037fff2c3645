// Trial state names, the typed JSON of parameters, and the process liveness check of the study store.
#include "hwtrain/sweep/trial_codec.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/process_identity.h"

namespace hwt::sweep {
namespace {

TEST(TrialCodec, StateNamesRoundTrip) {
  for (const auto state : {TrialState::kRunning, TrialState::kComplete, TrialState::kPruned, TrialState::kFailed,
                           TrialState::kInterrupted}) {
    EXPECT_EQ(parse_trial_state(trial_state_name(state)), state);
  }
  EXPECT_STREQ(trial_state_name(TrialState::kInterrupted), "interrupted");
  EXPECT_FALSE(parse_trial_state("RUNNING").has_value());
  EXPECT_FALSE(parse_trial_state("").has_value());
}

TEST(TrialCodec, ParamsKeepTheirTypeAndBits) {
  const Params params{{"a_real", 0.1},
                      {"b_whole_real", 3.0},
                      {"c_int", std::int64_t{3}},
                      {"d_neg_zero", -0.0},
                      {"e_subnormal", std::numeric_limits<double>::denorm_min()},
                      {"f_int_min", std::numeric_limits<std::int64_t>::min()},
                      {"g_text", std::string("b\"f\\16 \xc3\xa9")}};
  const std::string json = params_to_json(params);
  EXPECT_NE(json.find("\"c_int\":{\"int\":3}"), std::string::npos) << json;
  const Params back = params_from_json(json, "test");
  ASSERT_EQ(back.size(), params.size());
  for (const auto& [key, value] : params) {
    ASSERT_EQ(back.at(key).index(), value.index()) << key;
    if (const auto* real = std::get_if<double>(&value)) {
      const double got = std::get<double>(back.at(key));
      EXPECT_EQ(std::memcmp(&got, real, sizeof(double)), 0) << key;
    } else {
      EXPECT_EQ(back.at(key), value) << key;
    }
  }
  EXPECT_EQ(params_from_json("{}", "test"), Params{});
}

TEST(TrialCodec, NonFiniteRealIsRefused) {
  EXPECT_THROW(params_to_json({{"lr", std::numeric_limits<double>::infinity()}}), ConfigError);
  EXPECT_THROW(params_to_json({{"lr", std::nan("")}}), ConfigError);
  EXPECT_THROW(params_to_json({{"dtype", std::string("\xff\xfe")}}), ConfigError);  // not UTF-8
}

TEST(TrialCodec, DamagedJsonIsRefusedNamingWhere) {
  for (const char* bad : {"", "[1]", "{\"lr\": 0.1}", "{\"lr\": {\"real\": \"x\"}}", "{\"n\": {\"int\": 1.5}}",
                          "{\"n\": {\"int\": 18446744073709551615}}", "{\"n\": {\"real\": 1, \"int\": 1}}",
                          "{\"s\": {\"text\": \"a\"}}", "{\"lr\": {\"real\": 1e999}}"}) {
    try {
      params_from_json(bad, "sweep.db trial 4");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const IoError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("sweep.db trial 4: ", 0), 0u) << e.what();
    }
  }
}

TEST(ProcessIdentity, TellsLiveFromDeadAndReusedPids) {
  const std::int64_t self = ::getpid();
  const std::int64_t start = process_start_ticks(self);
  EXPECT_TRUE(local_process_alive(self, start));
  EXPECT_TRUE(local_process_alive(self, 0));
  if (start > 0) {
    EXPECT_FALSE(local_process_alive(self, start + 1));  // the pid now names another process
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // exited, not reaped
  if (start > 0) {
    EXPECT_FALSE(local_process_alive(child, 0));  // a zombie is dead
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(local_process_alive(child, 0));
  EXPECT_FALSE(local_process_alive(0, 0));
  EXPECT_NE(this_machine_key().find(this_host_name()), std::string::npos);
}

}  // namespace
}  // namespace hwt::sweep
