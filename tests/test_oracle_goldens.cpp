// The predictions against the oracle's goldens: tests/golden/oracle/<case-id>.json, measured on
// a GPU by tools/oracle (RUN.json says where and with what). For every golden, its batch is
// diagnosed with --backend none as an inference call and as a training step, and the
// prediction's outcome must be the measured call.forward / call.training. Every `golden <id>`
// basis the symptom table holds must name a golden that measured that very outcome. Without
// goldens the tests say so (SKIPPED, which ctest reports as skipped), never pass silently.
// tools/oracle/unresolved.json names the measured outcomes the prediction does not give yet,
// each with why: those are reported (WARN), any other disagreement fails, and so does a listed
// one that agrees again.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "doctor/doctor.hpp"
#include "predict/predict.hpp"

using namespace ad;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = ATTN_DOCTOR_SOURCE_DIR;
const fs::path kGoldens = kSource / "tests/golden/oracle";

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

// Every golden but RUN.json (the run's record), by case id.
std::vector<fs::path> goldens() {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(kGoldens, ec)) return out;
  for (const auto& e : fs::directory_iterator(kGoldens, ec))
    if (e.path().extension() == ".json" && e.path().filename() != "RUN.json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string predicted(const fs::path& batch_file, CallPass pass) {
  Batch b = load_batch_file(batch_file);
  b.pass = pass;
  CheckOptions o;
  o.backend = BackendChoice::none;
  Report r = diagnose(b, o, batch_file.string()).report;
  return r.prediction ? to_string(r.prediction->symptom.outcome) : "none";
}

}  // namespace

TEST_CASE("oracle goldens: every prediction is the measured outcome", "[predict][golden]") {
  const auto files = goldens();
  if (files.empty()) {
    WARN("SKIPPED: no oracle goldens in tests/golden/oracle yet (tools/oracle records them on a GPU); "
         "the predictions are not compared with measurements");
    return;
  }
  // disagreements under work, each with why (read, never written, by this test)
  const nlohmann::json unresolved = read_json(kSource / "tools/oracle/unresolved.json");
  std::vector<std::string> mismatches, open, stale;
  for (const fs::path& file : files) {
    const nlohmann::json g = read_json(file);
    INFO(file.filename().string());
    REQUIRE(g.contains("batch"));
    REQUIRE(g.contains("call"));
    CHECK(g.value("id", "") == file.stem().string());
    const fs::path batch = kSource / g["batch"].get<std::string>();
    REQUIRE(fs::is_regular_file(batch));
    for (CallPass pass : {CallPass::forward, CallPass::training}) {
      const std::string key = to_string(pass);
      if (!g["call"].contains(key) || g["call"][key].is_null()) continue;
      const std::string want = g["call"][key];
      REQUIRE(parse_outcome(want));
      const std::string got = predicted(batch, pass);
      const std::string id = file.stem().string();
      const bool listed = unresolved.contains(id) && unresolved[id].contains(key);
      const std::string line = id + " (" + key + "): measured " + want + ", predicted " + got;
      if (got != want && listed)
        open.push_back(line + ": " + unresolved[id][key].get<std::string>());
      else if (got != want)
        mismatches.push_back(line);
      else if (listed)
        stale.push_back(id + " (" + key + ") agrees now: remove it from tools/oracle/unresolved.json");
    }
  }
  std::string all;
  for (const auto& m : open) all += "\n  " + m;
  if (!open.empty()) WARN(open.size() << " measured outcomes not predicted yet (tools/oracle/unresolved.json):" << all);
  all.clear();
  for (const auto& m : mismatches) all += "\n  " + m;
  INFO(mismatches.size() << " of " << files.size() << " goldens disagree:" << all);
  CHECK(mismatches.empty());
  all.clear();
  for (const auto& m : stale) all += "\n  " + m;
  INFO(all);
  CHECK(stale.empty());
}

TEST_CASE("oracle goldens: every golden basis names a golden that measured its outcome", "[predict][golden]") {
  int golden_rows = 0;
  for (const SymptomRow& row : symptom_table()) {
    const std::string basis(row.basis);
    if (basis.rfind("golden ", 0) != 0) continue;
    ++golden_rows;
    const std::string id = basis.substr(7);
    INFO(row.invariant << " / " << row.variant << ": " << basis);
    const fs::path file = kGoldens / (id + ".json");
    REQUIRE(fs::is_regular_file(file));
    const nlohmann::json g = read_json(file);
    const char* pass = row.pass == Pass::forward ? "forward" : "backward";
    REQUIRE(g.contains(pass));
    REQUIRE(g[pass].is_object());
    CHECK(g[pass].value("outcome", "") == to_string(row.outcome));
  }
  if (golden_rows == 0)
    WARN("SKIPPED: no symptom-table row has a golden basis yet (every basis is a public report or the model)");
}
