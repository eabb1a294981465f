#pragma once
// The BatchNorm lab's values in the app. The lab's training and its value types are Qt-free, in
// course/ (course/bnlab_types.h, course/bnlab_session.h); the app names them unqualified and adds
// what the worker sends across threads. They hold values only (no tensors, no pointers into the
// engine), so queued signals carry them from the training worker's thread to the GUI thread.
#include <QMetaType>
#include <QVector>

#include "course/bnlab_types.h"

namespace gui {

using dpv::course::BnLabConfig;
using dpv::course::BnLabLayerStats;
using dpv::course::BnLabModel;
using dpv::course::BnLabModelStep;
using dpv::course::BnLabStep;
using dpv::course::BnLabDdpPerRank;
using dpv::course::BnLabDdpSync;
using dpv::course::BnLabPerDevice;
using dpv::course::BnLabReference;
using dpv::course::BnLabSync;
using dpv::course::bnlab_is_ddp;
using dpv::course::bnlab_model_name;
using dpv::course::kBnLabDpModelCount;
using dpv::course::kBnLabModelCount;

// What the worker sends at most every 50 ms: the steps taken since the last update.
struct BnLabUpdate {
  QVector<BnLabStep> steps;
  bool running = false;          // still training after these steps
};

}  // namespace gui

Q_DECLARE_METATYPE(gui::BnLabConfig)
Q_DECLARE_METATYPE(gui::BnLabUpdate)
