// The trainer routes' JSON (docs/protocol.md, "Trainer"): what a trainer away from the hub
// (`stoa train --hub`, roles/trainer/remote_port.h) and the hub's routes (trainer_routes.cpp)
// exchange — complete groups, a step's report, a published version. Parsing checks every field's
// type and throws kInvalidArgument naming the field, so a bad body is a 400, never a crash.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "pulse/catalog.h"
#include "pulse/publisher.h"
#include "roles/hub/trainer_port.h"

namespace stoa::hub {

nlohmann::json to_json(const AcceptedGroup& group);
AcceptedGroup accepted_group_from_json(const nlohmann::json& json);

nlohmann::json to_json(const StepReport& report);
StepReport step_report_from_json(const nlohmann::json& json);

// A version the trainer published into its own store: its blobs (uploaded before this is sent),
// the blobs its retention pruned, the int8 state's hash and the trainer's whole catalog after the
// publish, which the hub adopts once it holds every blob the catalog names.
struct PublishedVersion {
  pulse::Published published;
  Hash128 state_hash;
  pulse::Catalog catalog;
};
nlohmann::json to_json(const PublishedVersion& version);
PublishedVersion published_version_from_json(const nlohmann::json& json);

}  // namespace stoa::hub
