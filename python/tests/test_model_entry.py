"""The model entry hook (PreTrainedModel.__call__), against the fake transformers: a mask that
holds segment ids when the model's forward receives it is recorded at model level, because
the model's mask preparation (transformers >= 4.53: a bool cast) hides it from the attention
function; the guard then names the cast (mask.cast_to_bool) where the attention-level mask
alone passes every check."""
import json
import os
import unittest

import attn_doctor
from attn_doctor import diagnosis

from .support import fake_libraries, temp_dir

NEEDS_NATIVE = unittest.skipIf(diagnosis._native is None, "attn_doctor._native is not built for this Python")

# LlamaFactory's neat_packing: three packed sequences (5, 3, 4) numbered 1, 2, 3, then padding
SEGMENTS = [[1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 0, 0]]
PADDING = [[1] * 12 + [0, 0]]


def read_json(path):
    with open(path) as fh:
        return json.load(fh)


def model():
    from transformers.modeling_utils import FakeCausalLM, FakeConfig
    return FakeCausalLM(FakeConfig(model_type="llama", hidden_size=256, num_attention_heads=8,
                                   num_key_value_heads=2, pad_token_id=0))


def inputs(mask):
    from faketensor import FakeTensor
    return FakeTensor(shape=(len(mask), len(mask[0])), device="cuda:0"), FakeTensor(mask, device="cuda:0")


class ModelEntryCaptureTest(unittest.TestCase):
    def test_segment_ids_given_to_the_model_are_recorded_at_model_level(self):
        with fake_libraries(), temp_dir() as out:
            import transformers.modeling_utils as mu
            lm = model()
            ids, mask = inputs(SEGMENTS)
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                lm(input_ids=ids, attention_mask=mask)
            self.assertEqual(len(cap.files), 2)  # one call per layer
            doc = read_json(cap.files[0])
            # the attention received a bool mask of 12 ones; the document gives the model's
            self.assertEqual(doc["batch"]["attention_mask"], {"values": SEGMENTS, "level": "model"})
            self.assertEqual(doc["batch"]["position_ids"], {"from": "arange"})
            self.assertEqual(doc["environment"]["transformers"], "5.17.0")
            # the hook is gone again: PreTrainedModel inherits __call__ as before
            self.assertNotIn("__call__", mu.PreTrainedModel.__dict__)
            self.assertEqual(len(lm(input_ids=ids, attention_mask=mask)), 2)

    def test_positional_inputs_and_a_binary_mask(self):
        with fake_libraries(), temp_dir() as out:
            lm = model()
            ids, mask = inputs(SEGMENTS)
            ids2, padding = inputs(PADDING)
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                lm(ids, mask)          # positional: forward(input_ids, attention_mask)
                lm(ids2, padding)      # 0/1: the attention-level mask says it all
            docs = [read_json(f) for f in cap.files]
            self.assertEqual(docs[0]["batch"]["attention_mask"]["level"], "model")
            self.assertEqual(docs[2]["batch"]["attention_mask"],
                             {"lengths": [12], "width": 14, "padding_side": "right"})

    def test_no_model_entry_outside_a_model(self):
        with fake_libraries(), temp_dir() as out:
            # attention layers called without a model around them: attention-level as before
            from .test_hooks import ModelCalls
            from faketensor import FakeTensor
            layers = ModelCalls(model_type="llama")
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                layers.forward(FakeTensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], device="cuda:0"))
            self.assertNotIn("level", read_json(cap.files[0])["batch"]["attention_mask"])


@NEEDS_NATIVE
class ModelEntryGuardTest(unittest.TestCase):
    def test_the_guard_names_the_cast(self):
        with fake_libraries():
            import flash_attn.flash_attn_interface as fai
            lm = model()
            ids, mask = inputs(SEGMENTS)
            with attn_doctor.guard() as guard:
                with self.assertRaises(attn_doctor.VarlenError) as caught:
                    lm(input_ids=ids, attention_mask=mask)
                self.assertEqual(fai.CALLS, [])  # stopped before the kernel
                err = caught.exception
                self.assertEqual(err.id, "mask.cast_to_bool")
                self.assertIn("casts it to bool", str(err))
                self.assertIn("the 3 packed sequences of row 0 attend to each other", str(err))
                self.assertEqual(err.batch["batch"]["attention_mask"]["level"], "model")
                # the same shapes with a 0/1 mask: not the cached verdict, and it passes
                ids2, padding = inputs(PADDING)
                lm(input_ids=ids2, attention_mask=padding)
                self.assertEqual(guard.stats["raised"], 1)
            with temp_dir() as out:
                path = err.save(os.path.join(out, "call.json"))
                report = attn_doctor.check(path, backend="none")
                self.assertEqual(report["first_violation"]["id"], "mask.cast_to_bool")


if __name__ == "__main__":
    unittest.main()
