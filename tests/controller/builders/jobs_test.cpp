// The one-shot Jobs (builders/jobs): schema migration, requeue and replay, drop.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <algorithm>

#include "controller/builders/rendered.hpp"

namespace outbox::controller {
namespace {

using testing::find;
using testing::relay;
using testing::requeue_jobs;
using testing::requeue_requested;

// spec.database.manageSchema renders one Job running `migrate` for the spec's table (with
// --adopt for columns, shards and mode when set); its name follows the image and arguments,
// so an operator upgrade runs it again and an unchanged spec never does.
TEST(RenderRelay, ManageSchemaRendersAMigrateJobNamedByImageAndArguments) {
  RenderOptions opts{"img:1"};
  auto jobs = [](const RenderedRelay& r) {
    std::vector<Json> out;
    for (const auto& o : r.objects) {
      if (o.object.at("kind") == "Job") {
        out.push_back(o.object);
      }
    }
    return out;
  };
  EXPECT_TRUE(jobs(render_relay(relay(), opts)).empty());
  EXPECT_EQ(schema_job_name(relay(), opts), "");
  const Json managed = relay({{"database",
                               {{"manageSchema", true},
                                {"table", "public.outbox"},
                                {"mode", "Log"},
                                {"columns", {{"createdAt", "timestamp"}}}}},
                              {"relay", {{"shards", 16}}}});
  const auto rendered = jobs(render_relay(managed, opts));
  ASSERT_EQ(rendered.size(), 1u);
  const Json& job = rendered[0];
  const std::string name = schema_job_name(managed, opts);
  EXPECT_EQ(job.at("/metadata/name"_json_pointer), name);
  EXPECT_EQ(name.rfind("orders-schema-", 0), 0u) << name;
  EXPECT_LE(name.size(), 63u);
  const Json c = job.at("/spec/template/spec/containers/0"_json_pointer);
  EXPECT_EQ(c.at("args"),
            Json::array({"migrate", "--table=public.outbox", "--column=eventId=id",
                         "--column=bizType=aggregatetype", "--column=bizId=aggregateid",
                         "--column=payload=payload", "--column=createdAt=timestamp", "--adopt",
                         "--shards=16", "--mode=log"}));
  EXPECT_EQ(c.at("/env/0"_json_pointer),
            Json({{"name", "OUTBOX_DSN_FILE"}, {"value", "/etc/outbox/database/dsn"}}));
  EXPECT_EQ(job.at("/spec/template/spec/restartPolicy"_json_pointer), "Never");
  EXPECT_EQ(schema_job_name(managed, opts), name) << "stable for the same spec and image";
  EXPECT_NE(schema_job_name(managed, RenderOptions{"img:2"}), name) << "a new image reruns it";
  EXPECT_NE(schema_job_name(relay({{"database", {{"manageSchema", true}}}}), opts), name);
  const Json bytes = jobs(
      render_relay(relay({{"database", {{"manageSchema", true}, {"payload", "Bytes"}}}}), opts))[0];
  EXPECT_NE(bytes.at("/spec/template/spec/containers/0/args"_json_pointer)
                .dump()
                .find("\"--payload=bytes\""),
            std::string::npos);
}

// deletionPolicy: Drop. The Job runs `migrate --drop` with the DSN as a file, and has no owner
// and no API token: it outlives owned objects a foreground deletion removes first.
TEST(RenderRelay, TheDropJobMigratesDropWithTheDsnFileAndNoOwnerOrToken) {
  const Json adopted = relay({{"database",
                               {{"manageSchema", true},
                                {"table", "public.outbox"},
                                {"columns", {{"createdAt", "timestamp"}}}}},
                              {"deletionPolicy", "Drop"}});
  EXPECT_TRUE(drops_on_deletion(adopted));
  EXPECT_FALSE(drops_on_deletion(relay()));
  EXPECT_FALSE(drops_on_deletion(relay({{"deletionPolicy", "Retain"}})));
  const OwnedObject job = drop_job(adopted, RenderOptions{"img:1"});
  EXPECT_EQ(job.resource, &owned::jobs);
  const Json& o = job.object;
  EXPECT_EQ(o.at("/metadata/name"_json_pointer), drop_job_name(adopted));
  EXPECT_EQ(drop_job_name(adopted).rfind("orders-drop-", 0), 0u);
  EXPECT_LE(drop_job_name(adopted).size(), 57u);
  Json other = adopted;
  other["metadata"]["uid"] = "u-2";
  EXPECT_NE(drop_job_name(other), drop_job_name(adopted)) << "a new resource, a new Job";
  EXPECT_FALSE(o.at("metadata").contains("ownerReferences"));
  EXPECT_EQ(o.at("/metadata/labels/app.kubernetes.io~1instance"_json_pointer), "orders");
  EXPECT_EQ(o.at("/metadata/labels/app.kubernetes.io~1component"_json_pointer), "drop");
  const Json& pod = o.at("/spec/template/spec"_json_pointer);
  EXPECT_FALSE(pod.contains("serviceAccountName"));
  EXPECT_EQ(pod.at("automountServiceAccountToken"), false);
  EXPECT_EQ(pod.at("restartPolicy"), "Never");
  const Json& c = pod.at("/containers/0"_json_pointer);
  EXPECT_EQ(c.at("args"),
            Json::array({"migrate", "--drop", "--table=public.outbox", "--column=eventId=id",
                         "--column=bizType=aggregatetype", "--column=bizId=aggregateid",
                         "--column=payload=payload", "--column=createdAt=timestamp", "--adopt"}));
  EXPECT_EQ(c.at("/env/0"_json_pointer),
            Json({{"name", "OUTBOX_DSN_FILE"}, {"value", "/etc/outbox/database/dsn"}}));
  EXPECT_EQ(c.at("/volumeMounts/1/mountPath"_json_pointer), "/etc/outbox/database");
  EXPECT_EQ(o.at("/spec/ttlSecondsAfterFinished"_json_pointer), 86400);
  // Never among the objects a live resource renders.
  for (const auto& rendered : render_relay(adopted, RenderOptions{"img:1"}).objects) {
    EXPECT_NE(rendered.object.at("/metadata/name"_json_pointer), drop_job_name(adopted));
  }
}

// outbox.dev/requeue-failed: one Job per request token, named by its hash, running `requeue
// --all` on the spec's table in the relay's image and pod settings (the DSN from the Secret,
// never an argument), writing the token back as status.lastRequeue.request. Once the status
// holds the token (whatever the outcome), the Job is no longer rendered; a new token renders a
// new Job.
TEST(RenderRelay, ARequeueAnnotationRendersOneJobUntilItsRequestIsAnswered) {
  const RenderOptions opts{"img:1"};
  const std::string token = "2026-12-04T10:00:00Z";
  const std::string name = "orders-requeue-" + stable_hash(token).substr(0, 8);
  const RequeueRequest request = requeue_request(requeue_requested(token));
  EXPECT_EQ(request.token, token);
  EXPECT_EQ(request.job, name);
  EXPECT_EQ(request.problem, "");
  const auto jobs = requeue_jobs(render_relay(requeue_requested(token), opts));
  ASSERT_EQ(jobs.size(), 1u);
  const Json& job = jobs[0];
  EXPECT_EQ(job.at("/metadata/name"_json_pointer), name);
  EXPECT_LE(name.size(), 63u);
  EXPECT_EQ(job.at("/metadata/ownerReferences/0/uid"_json_pointer), "u-1");
  EXPECT_EQ(job.at("/metadata/labels/app.kubernetes.io~1component"_json_pointer), "requeue");
  EXPECT_EQ(job.at("/spec/backoffLimit"_json_pointer), 2);
  EXPECT_EQ(job.at("/spec/activeDeadlineSeconds"_json_pointer), 600);
  EXPECT_EQ(job.at("/spec/ttlSecondsAfterFinished"_json_pointer), 86400);
  const Json pod = job.at("/spec/template/spec"_json_pointer);
  EXPECT_EQ(pod.at("serviceAccountName"), "orders-relay") << "its token may patch the status";
  EXPECT_EQ(pod.at("restartPolicy"), "Never");
  EXPECT_TRUE(pod.at("/securityContext/runAsNonRoot"_json_pointer).get<bool>());
  const Json c = pod.at("/containers/0"_json_pointer);
  EXPECT_EQ(c.at("name"), "requeue");
  EXPECT_EQ(c.at("image"), "img:1");
  EXPECT_EQ(c.at("args"),
            Json::array({"requeue", "--table=public.outbox_event", "--all",
                         "--request=2026-12-04T10:00:00Z", "--report-status=shop/orders"}));
  EXPECT_EQ(c.at("/env/0"_json_pointer),
            Json({{"name", "OUTBOX_DSN_FILE"}, {"value", "/etc/outbox/database/dsn"}}));
  EXPECT_TRUE(c.at("/securityContext/readOnlyRootFilesystem"_json_pointer).get<bool>());
  EXPECT_EQ(c.at("volumeMounts").size(), 2u) << "no Kafka credentials: " << c.dump();

  // An adopted table's columns reach it too, and it runs beside the schema Job.
  const Json adopted = requeue_requested(token, Json(),
                                         {{"database",
                                           {{"manageSchema", true},
                                            {"table", "public.outbox"},
                                            {"columns", {{"createdAt", "timestamp"}}}}}});
  const RenderedRelay both = render_relay(adopted, opts);
  EXPECT_NE(find(both, "Job", schema_job_name(adopted, opts)), nullptr);
  const Json args =
      requeue_jobs(both).at(0).at("/spec/template/spec/containers/0/args"_json_pointer);
  EXPECT_EQ(args.at(1), "--table=public.outbox");
  EXPECT_NE(std::find(args.begin(), args.end(), "--column=createdAt=timestamp"), args.end());

  // Answered, Succeeded or Failed: not rendered again, even after the Job is deleted.
  for (const char* outcome : {"Succeeded", "Failed"}) {
    const Json answered = requeue_requested(
        token, {{"lastRequeue", {{"request", token}, {"outcome", outcome}, {"requeued", 3}}}});
    EXPECT_EQ(requeue_request(answered).job, "") << outcome;
    EXPECT_TRUE(requeue_jobs(render_relay(answered, opts)).empty()) << outcome;
  }
  // A new token after an answered one: a new Job.
  const Json next = requeue_requested(
      "2026-12-05T08:00:00Z", {{"lastRequeue", {{"request", token}, {"outcome", "Succeeded"}}}});
  const auto next_jobs = requeue_jobs(render_relay(next, opts));
  ASSERT_EQ(next_jobs.size(), 1u);
  EXPECT_NE(next_jobs[0].at("/metadata/name"_json_pointer), name);
  EXPECT_EQ(next_jobs[0].at("/metadata/name"_json_pointer), requeue_request(next).job);
  // No annotation: no Job, nothing to answer.
  EXPECT_TRUE(requeue_jobs(render_relay(relay(), opts)).empty());
  EXPECT_EQ(requeue_request(relay()).token, "");
}

}  // namespace
}  // namespace outbox::controller
