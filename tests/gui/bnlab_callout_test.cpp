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

// DDP's padding is said with the run's numbers, and only when the sampler padded.
TEST(BnLabCallout, SaysWhenDdpPaddedTheBatchAndHowFarItsSyncBatchNormIs) {
  BnLabCalloutInput in;
  in.devices = 4;
  in.batchSize = 12;
  in.steps = 3;
  in.ddpBatchRows = 12;
  in.ddpShards = {3, 3, 3, 3};
  in.ddpSyncDistance = 2e-7;
  in.dpSyncDistance = 1e-7;
  EXPECT_FALSE(bnlab_callout_paragraphs(in).join(' ').contains("pads")) << "no padding, no word of it";
  in.batchSize = 10;
  in.ddpBatchRows = 10;
  in.ddpPadding = 2;
  in.ddpSyncDistance = 0.37;
  const QString text = bnlab_callout_paragraphs(in).join(' ');
  EXPECT_TRUE(text.contains("DDP pads the batch")) << text.toStdString();
  EXPECT_TRUE(text.contains("(3, 3, 3, 3)")) << text.toStdString();
  EXPECT_TRUE(text.contains("the batch of 10 becomes 12 rows, 2 sample(s) repeated")) << text.toStdString();
  EXPECT_TRUE(text.contains("is 0.37 after this step")) << text.toStdString();
  EXPECT_TRUE(text.contains("pads nothing: 1e-07")) << text.toStdString();
}

}  // namespace gui
