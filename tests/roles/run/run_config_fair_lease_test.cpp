// The run config's keys for issue 32: the fair-leasing caps and hoarding deadline in [hub], and
// [verify] enabled defaulting to on for a hub that binds beyond loopback (off only by an explicit
// `enabled = false`), with to_toml keeping "unset" unset.
#include <gtest/gtest.h>

#include "roles/run/run_config.h"

namespace stoa::run {
namespace {

std::string config_text(const std::string& hub_extra, const std::string& verify = "") {
  return "[run]\nmodel = \"m\"\ndata = \"d\"\ntask = \"search\"\n[hub]\njoin_token = \"t\"\n" +
         hub_extra + (verify.empty() ? "" : "[verify]\n" + verify);
}

TEST(RunConfigFairLease, CapsAndTheHoardingDeadlineAreReadAndWrittenBack) {
  const RunConfig d = parse_run_config(config_text(""), "run.toml", "");
  EXPECT_EQ(d.hub.lease_caps.per_worker, 4u);
  EXPECT_EQ(d.hub.lease_caps.per_address, 8u);
  EXPECT_EQ(d.hub.lease_caps.per_token, 0u);
  EXPECT_EQ(d.hub.hoard_grace_ms, 120'000);
  EXPECT_EQ(d.hub.hoard_min_tokens_per_s, 1.0);
  const RunConfig c = parse_run_config(
      config_text("max_leases_per_worker = 2\nmax_leases_per_address = 5\n"
                  "max_leases_per_token = 7\nhoard_grace_s = 30\nhoard_min_tokens_per_s = 2.5\n"),
      "run.toml", "");
  EXPECT_EQ(c.hub.lease_caps.per_worker, 2u);
  EXPECT_EQ(c.hub.lease_caps.per_address, 5u);
  EXPECT_EQ(c.hub.lease_caps.per_token, 7u);
  EXPECT_EQ(c.hub.hoard_grace_ms, 30'000);
  EXPECT_EQ(c.hub.hoard_min_tokens_per_s, 2.5);
  const RunConfig r = parse_run_config(to_toml(c), "rt.toml", "");
  EXPECT_EQ(r.hub.lease_caps.per_worker, 2u);
  EXPECT_EQ(r.hub.lease_caps.per_address, 5u);
  EXPECT_EQ(r.hub.lease_caps.per_token, 7u);
  EXPECT_EQ(r.hub.hoard_grace_ms, 30'000);
  EXPECT_EQ(r.hub.hoard_min_tokens_per_s, 2.5);
  EXPECT_THROW(parse_run_config(config_text("hoard_min_tokens_per_s = -1\n"), "run.toml", ""),
               Error);
  EXPECT_THROW(parse_run_config(config_text("max_leases_per_wroker = 1\n"), "run.toml", ""), Error);
}

TEST(RunConfigFairLease, VerificationDefaultsOnBeyondLoopbackAndOffOnLoopback) {
  const RunConfig local = parse_run_config(config_text(""), "run.toml", "");
  EXPECT_FALSE(local.hub.verify.enabled) << "loopback (the default host): as before";
  EXPECT_FALSE(local.hub.beyond_loopback);
  EXPECT_FALSE(local.verify_enabled.has_value());
  const RunConfig open = parse_run_config(config_text("host = \"0.0.0.0\"\n"), "run.toml", "");
  EXPECT_TRUE(open.hub.verify.enabled);
  EXPECT_TRUE(open.hub.beyond_loopback);
  EXPECT_FALSE(open.verify_enabled.has_value());
  // Unset stays unset in the file, so the host decides when the config is read back.
  const std::string text = to_toml(open);
  EXPECT_EQ(text.find("enabled ="), std::string::npos) << text;
  EXPECT_TRUE(parse_run_config(text, "rt.toml", "").hub.verify.enabled);
  // Off beyond loopback only when the file says so (the hub then warns: fair_lease_test).
  const RunConfig off =
      parse_run_config(config_text("host = \"0.0.0.0\"\n", "enabled = false\n"), "run.toml", "");
  EXPECT_FALSE(off.hub.verify.enabled);
  ASSERT_TRUE(off.verify_enabled.has_value());
  EXPECT_FALSE(parse_run_config(to_toml(off), "rt.toml", "").hub.verify.enabled);
  // A config built in code (the demo) that turns it on over loopback keeps it on.
  RunConfig demo = local;
  demo.hub.verify.enabled = true;
  EXPECT_TRUE(parse_run_config(to_toml(demo), "rt.toml", "").hub.verify.enabled);
}

TEST(RunConfigFairLease, PeerChecksFollowVerificationsDefault) {
  const RunConfig local = parse_run_config(config_text(""), "run.toml", "");
  EXPECT_FALSE(local.hub.verify.peer);
  const RunConfig open = parse_run_config(config_text("host = \"0.0.0.0\"\n"), "run.toml", "");
  EXPECT_TRUE(open.hub.verify.peer) << "a hub serving strangers checks every rollout";
  EXPECT_EQ(to_toml(open).find("peer ="), std::string::npos) << "the host decides when read back";
  EXPECT_TRUE(parse_run_config(to_toml(open), "rt.toml", "").hub.verify.peer);
  // Off only by its key (sampled replay instead), or with verification itself.
  const RunConfig sampled =
      parse_run_config(config_text("host = \"0.0.0.0\"\n", "peer = false\n"), "run.toml", "");
  EXPECT_TRUE(sampled.hub.verify.enabled);
  EXPECT_FALSE(sampled.hub.verify.peer);
  EXPECT_FALSE(parse_run_config(to_toml(sampled), "rt.toml", "").hub.verify.peer);
  const RunConfig off =
      parse_run_config(config_text("host = \"0.0.0.0\"\n", "enabled = false\n"), "run.toml", "");
  EXPECT_FALSE(off.hub.verify.peer);
  // Turned on in code over loopback (stoa demo --peer-checks): kept when read back.
  RunConfig demo = local;
  demo.hub.verify.enabled = true;
  demo.hub.verify.peer = true;
  EXPECT_TRUE(parse_run_config(to_toml(demo), "rt.toml", "").hub.verify.peer);
  EXPECT_THROW(parse_run_config(config_text("", "audit_fraction = 2\n"), "run.toml", ""), Error);
  EXPECT_THROW(parse_run_config(config_text("", "max_checks_in_flight = 0\n"), "run.toml", ""),
               Error);
}

}  // namespace
}  // namespace stoa::run
