#include "gui/ddp/code.h"

#include "course/sample_program.h"
#include "engine/error.h"

namespace gui {

QVector<CodeLine> ddpScriptLines(const AppSettings& settings, int ranks, qint64 rows, qint64 bucketBytes) {
  dpv::course::DdpProgramOptions options;
  options.preset = settings.preset.toStdString();
  options.ranks = ranks;
  options.rows = rows;
  options.bucket_bytes = bucketBytes;
  options.lr = settings.learningRate;
  try {
    return codeLinesOf(dpv::course::ddp_program(options));
  } catch (const dpv::Error&) {
    options.preset = dpv::course::kSamplePreset;  // an unknown preset shows the seed's own model, as userCodeLines does
    return codeLinesOf(dpv::course::ddp_program(options));
  }
}

QVector<CodeLine> ddpSourceLines() { return codeLinesOf(dpv::course::ddp_source_program()); }

}  // namespace gui
