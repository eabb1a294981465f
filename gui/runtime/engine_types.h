#pragma once
// Engine values that cross from the worker thread to the GUI thread in queued signals. They are
// plain values (copied into the event queue), so the GUI never touches engine objects.
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <optional>
#include <vector>

#include "course/lesson_facts.h"
#include "engine/error.h"
#include "engine/model_spec.h"
#include "engine/observer.h"
#include "engine/strategy.h"
#include "engine/zero/flat_layout.h"

namespace gui {

// What the GUI needs to draw an iteration before its first stage has run.
struct IterationInfo {
  quint64 generation = 0;      // settings generation the iteration belongs to
  int iteration = 0;           // 1 for the first iteration after (re)configuring
  std::vector<dpv::Stage> plan;
  std::vector<int64_t> chunks;  // torch.chunk sizes of the batch
  QStringList deviceLabels;     // "GPU 1 (simulated on CPU)", one per device of the set
  // The same devices' labels in parts, what the pages lay out (never split out of deviceLabels).
  struct DeviceTitle {
    QString name;            // "GPU 1"
    QString detail;          // "simulated on CPU", the GPU's name, ...; empty for none
    bool simulated = false;  // a CPU device standing in for a GPU
  };
  std::vector<DeviceTitle> deviceTitles;
  QString deviceSpec;           // "cpu:4"
  QString transport;            // "host threads", "NCCL", ...
  QString inputShape;           // "[10, 10]"
  QString inputDtype;           // "float32"
  QString targetShape;          // "[10]"
  QStringList layerNames;       // "Linear", "BatchNorm1d", ... in model order
  std::vector<dpv::LayerKind> layerKinds;  // the same layers' kinds, what the pages decide on
  std::string preset;           // the model preset: the code panel's program names its parameters from it
  QString modelText;            // PyTorch repr of the model (Sequential(...))
  std::vector<double> inputHead;  // a few input values

  // The strategy run. `ddp`: its plan is DDP's ranks' (DDP or ZeRO, dpv::runs_ranks), one rank
  // per device, with what follows filled in.
  dpv::StrategyKind strategy = dpv::StrategyKind::DataParallel;
  bool ddp = false;
  qint64 batchRows = 0;                        // rows of the global batch
  std::vector<std::vector<int64_t>> shards;    // per rank: DistributedSampler's indices of the batch
  std::vector<std::vector<bool>> padding;      // per rank: which of those are padding duplicates
  double bucketCapMb = 0;                      // DistributedDataParallel(bucket_cap_mb=...)
  qint64 firstBucketBytes = 0;                 // dist._DEFAULT_FIRST_BUCKET_BYTES in this run
  qint64 parameterBytes = 0;                   // all parameters of the model
  std::vector<dpv::DeviceState> devicesBefore;  // what the devices hold before the first stage
  // ZeRO-1: ZeroRedundancyOptimizer's partition (each rank's parameters); ZeRO-2/3: FSDP's flat
  // parameter layout over the ranks. Both from the engine's own functions over the model's
  // parameters (dpv::zero1_partition, dpv::make_flat_layout); empty for the other strategies.
  dpv::ZeroPartition zeroPartition;
  std::vector<std::string> parameterNames;  // the engine's names of the model's parameters, in model order
  std::optional<dpv::FlatLayout> flatLayout;

  // What the stage lessons may say about this run (course/lesson_facts.h), before the first
  // stage; dpv::course::lesson_facts_after gives them after a stage.
  dpv::course::LessonFacts lessonFacts;
};

// An engine error as the pages see it: the words for the learner beside the typed facts a page
// decides on (why, and which replica, rank, device and stage), so no page reads the message.
struct EngineFailure {
  QString message;  // dpv::Error::full(): "ValueError: Expected more than 1 value per channel ..."
  dpv::ErrorReason reason = dpv::ErrorReason::Unspecified;
  dpv::ErrorSite site;
  // Raised while a stage of the PyTorch program ran (PyTorch raises the same there), not while
  // the app prepared devices, model or data.
  bool inProgram = false;
};

}  // namespace gui

Q_DECLARE_METATYPE(gui::EngineFailure)
Q_DECLARE_METATYPE(dpv::StageEvent)
Q_DECLARE_METATYPE(dpv::TensorInfo)
Q_DECLARE_METATYPE(gui::IterationInfo)

namespace gui {

// Registers the types above (and AppSettings) for queued connections; idempotent.
void registerEngineMetaTypes();

// The engine's stage names (engine/observer.h) as QStrings: the id, which names the lesson file
// lessons/stages/<id>.md ("scatter", "grad_scatter", ...), and the short title ("Grad scatter")
// shown to the learner, translated (context "gui::Stage", the engine's title as the source text).
QString stageLessonId(dpv::StageKind kind);
QString stageShortTitle(dpv::StageKind kind);
// "1.2 KB", "3.4 MB" (powers of 1024, one decimal).
QString formatBytes(double bytes);
// "[3, 10]"
QString formatShape(const dpv::Shape& shape);

}  // namespace gui
