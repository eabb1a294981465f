// The BatchNorm lab's callout: the text the page shows for the chunks of the batch and an engine error.
#include <gtest/gtest.h>

#include "gui/bnlab/callout.h"

namespace gui {

TEST(BnLabCallout, NamesOneSampleChunksAndIdleDevices) {
  BnLabCalloutInput in;
  in.devices = 4;
  in.batchSize = 32;
  EXPECT_TRUE(bnlab_callout_paragraphs(in).isEmpty());
  in.batchSize = 10;
  const QString oneSample = bnlab_callout_paragraphs(in).join(' ');
  EXPECT_TRUE(oneSample.contains("3, 3, 3, 1")) << oneSample.toStdString();
  EXPECT_TRUE(oneSample.contains("GPU 3")) << oneSample.toStdString();
  in.batchSize = 5;  // 2, 2, 1: one idle device and a one-sample chunk
  const QStringList both = bnlab_callout_paragraphs(in);
  ASSERT_EQ(both.size(), 2);
  EXPECT_TRUE(both[0].contains("GPU 3 gets no rows")) << both[0].toStdString();
  EXPECT_TRUE(both[1].contains("GPU 2 gets a single sample")) << both[1].toStdString();
  in.failure = "ValueError: <engine> & text";
  in.failureModel = "per-device BatchNorm";
  const QString html = bnlab_callout_html(in);
  EXPECT_TRUE(html.contains("&lt;engine&gt; &amp; text")) << "engine text is quoted verbatim, escaped";
}

}  // namespace gui
