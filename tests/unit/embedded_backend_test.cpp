// An embedded build links backends into the runtime (KITE_STATIC_BACKENDS):
// devsim is found by name with no plugin file anywhere.
#include <gtest/gtest.h>

#include "kite/kite.h"
#include "test_models.h"

TEST(EmbeddedBackends, StaticallyLinkedBackendNeedsNoPlugin) {
  const auto bytes = kite::test::serialize_or_die(kite::test::add_relu_model());
  kite_model* model = nullptr;
  ASSERT_EQ(kite_model_load_memory(bytes.data(), bytes.size(), &model), KITE_OK);
  kite_session_options* o = nullptr;
  ASSERT_EQ(kite_session_options_create(&o), KITE_OK);
  kite_session_options_set_backends(o, "devsim");
  kite_session_options_set_backend_path(o, "/nonexistent");
  kite_session_options_set_strict(o, 1);
  kite_session* s = nullptr;
  ASSERT_EQ(kite_session_create(model, o, &s), KITE_OK) << kite_last_error();
  kite_node_placement p;
  ASSERT_EQ(kite_session_get_node_placement(s, 0, &p), KITE_OK);
  EXPECT_STREQ(p.backend, "devsim");
  const float x[6] = {1, 2, 3, -4, -5, -6};
  float y[6];
  ASSERT_EQ(kite_session_set_input(s, 0, x, sizeof(x)), KITE_OK);
  ASSERT_EQ(kite_session_run(s), KITE_OK);
  ASSERT_EQ(kite_session_get_output(s, 0, y, sizeof(y)), KITE_OK);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[2], 4.0f);
  kite_session_destroy(s);
  kite_session_options_destroy(o);
  kite_model_destroy(model);
}
