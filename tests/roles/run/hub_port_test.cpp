// roles/run/hub_port.h: the port a `[hub] port = 0` hub took at its first start, kept in the run
// directory for every restart (the process-level restart is tests/integration/hub_restart_test).
#include "roles/run/hub_port.h"

#include <fstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "roles/run/minimal_run_config.h"
#include "support/temp_dir.h"

namespace stoa::run {
namespace {

class HubPortTest : public stoa::testing::TempDirTest {
 protected:
  RunConfig config_with_port(int port) const {
    RunConfig c = minimal_run_config();
    c.run_dir = dir.string();
    c.server.port = port;
    return c;
  }
};

TEST_F(HubPortTest, TheFirstStartsPortIsRecordedAndBoundAgain) {
  const RunConfig c = config_with_port(0);
  EXPECT_EQ(hub_port_to_bind(c).port, 0) << "first start: any free port";
  EXPECT_FALSE(hub_port_to_bind(c).recorded);
  remember_hub_port(c, 41234);
  EXPECT_EQ(hub_port_to_bind(c).port, 41234);
  EXPECT_TRUE(hub_port_to_bind(c).recorded);
  remember_hub_port(c, 50000);  // a restart bound the recorded port; nothing else is written
  EXPECT_EQ(hub_port_to_bind(c).port, 41234);
}

TEST_F(HubPortTest, APortTheConfigNamesIsBoundAsItIsAndNeverRecorded) {
  const RunConfig c = config_with_port(8443);
  remember_hub_port(c, 8443);
  EXPECT_FALSE(std::filesystem::exists(hub_port_path(c)));
  EXPECT_EQ(hub_port_to_bind(c).port, 8443);
  EXPECT_FALSE(hub_port_to_bind(c).recorded);
}

TEST_F(HubPortTest, AFileWithoutAPortIsRefusedSayingWhatToDo) {
  const RunConfig c = config_with_port(0);
  for (const char* text : {"", "eighty\n", "70000\n", "8443 8444\n"}) {
    std::ofstream(hub_port_path(c)) << text;
    try {
      hub_port_to_bind(c);
      FAIL() << "'" << text << "' was read as a port";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadFormat);
      EXPECT_NE(std::string(e.what()).find("delete it to take a new port"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace stoa::run
