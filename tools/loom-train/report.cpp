#include "tools/loom-train/report.hpp"

#include <fstream>
#include <stdexcept>

#include "base/json.hpp"

namespace loom::train::cli {
namespace {

// A per-rank column on one line: shares as they are, byte counts as integers.
void writeShares(JsonWriter& json, const std::vector<double>& values) {
  json.beginArray(JsonWriter::Layout::OneLine);
  for (double v : values) json.value(v);
  json.endArray();
}

void writeBytes(JsonWriter& json, const std::vector<double>& values) {
  json.beginArray(JsonWriter::Layout::OneLine);
  for (double v : values) json.value(static_cast<long long>(v));
  json.endArray();
}

void writeStep(JsonWriter& json, const StepRecord& r, bool mesh) {
  json.beginObject()
      .field("step", static_cast<long long>(r.step))
      .field("loss", r.loss)
      .field("grad_norm", r.gradNorm)
      .field("seconds", r.seconds)
      .field("comm_seconds", r.commSeconds)
      .field("exposed_comm_seconds", r.exposedCommSeconds)
      .field("samples", static_cast<long long>(r.samples))
      .field("flops_per_second", r.flopsPerSecond)
      .field("mfu", r.mfu);
  if (r.heldOutLoss >= 0) json.field("held_out_loss", r.heldOutLoss);
  if (!r.sample.empty()) json.field("sample", r.sample);
  if (mesh) {
    json.key("rank_idle");
    writeShares(json, r.rankIdle);
    json.key("rank_sent_bytes").beginObject();
    json.key("dp");
    writeBytes(json, r.rankSentDp);
    json.key("pp");
    writeBytes(json, r.rankSentPp);
    json.key("tp");
    writeBytes(json, r.rankSentTp);
    json.endObject();
    json.key("rank_activation_peak_bytes");
    writeBytes(json, r.rankActivationPeak);
  }
  json.endObject();
}

}  // namespace

void writeJson(const std::string& path, const RunRecord& run) {
  JsonWriter json;
  json.beginObject();
  json.key("config")
      .beginObject()
      .field("model", run.model)
      .field("mode", run.mode)
      .field("precision", run.precision)
      .field("ranks", run.ranks)
      .field("batch", static_cast<long long>(run.batch))
      .field("micro_batches", static_cast<long long>(run.microBatches))
      .field("steps", static_cast<long long>(run.steps))
      .field("layers", static_cast<long long>(run.layers))
      .field("dim", static_cast<long long>(run.dim))
      .field("lr", run.lr)
      .field("seed", static_cast<long long>(run.seed))
      .field("peak_flops", run.peakFlops)
      .endObject();
  json.key("steps").beginArray();
  for (const StepRecord& r : run.records) writeStep(json, r, run.mesh);
  json.endArray();
  json.key("final")
      .beginObject()
      .field("params_sha256", run.paramsSha256)
      .field("psi", static_cast<long long>(run.psi))
      .field("test_accuracy", run.testAccuracy)
      .field("held_out_loss", run.heldOutLoss);
  if (!run.sample.empty()) json.field("sample", run.sample);
  json.key("peak_bytes").beginObject();
  for (const auto& [category, bytes] : run.peakBytes) json.field(category, static_cast<long long>(bytes));
  json.endObject();
  if (run.mesh) {
    json.field("schedule", run.schedule)
        .field("chunks", run.chunks)
        .field("dp", run.dp)
        .field("pp", run.pp)
        .field("tp", run.tp);
    json.key("rank_activation_peak_bytes");
    writeBytes(json, run.rankActivationPeak);
  }
  json.endObject();
  json.endObject();
  std::ofstream out(path);
  out << json.str();
  if (!out) throw std::runtime_error("--json " + path + ": cannot write");
}

}  // namespace loom::train::cli
