#include "gui/network/real_link.h"

#include <QStandardPaths>
#include <QStringList>

#include "engine/netmodel/net_admin.h"
#include "gui/runtime/process_run.h"

namespace gui {

dpv::course::RealLinkFacts findRealLinkFacts() {
  dpv::course::RealLinkFacts facts;
  facts.privileged = dpv::netmodel::has_net_admin();
  QStringList searched;
  QString found = ProcessRun::findDpv(&searched);
  if (found.isEmpty()) found = QStandardPaths::findExecutable(QStringLiteral("dpv"));
  facts.dpv_exe = found.toStdString();
  if (found.isEmpty()) {
    facts.dpv_missing_reason = "no dpv binary to run the lab was found (looked in " +
                               searched.join(QStringLiteral(", ")).toStdString() +
                               " and on PATH): install dpv beside the app";
  }
  return facts;
}

}  // namespace gui
