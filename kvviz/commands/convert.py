"""`kvviz convert --model tiny --out DIR`: any model kvviz loads written as a Hugging Face checkpoint folder
(config.json, model.safetensors, tokenizer.json, tokenizer_config.json) that transformers and vLLM load;
a byte model's tokenizer.json is kvviz's byte tokenizer exactly (kvviz.peers.hf_export).
"""
from __future__ import annotations

from kvviz.options import add_model


def configure(parser) -> None:
    add_model(parser, "tiny", "preset name, model folder, or cached hub id ORG/NAME[@REV] (default: tiny)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the checkpoint folder to write: a new or empty folder, or one an earlier "
                             "conversion wrote")


def run(args) -> int:
    from kvviz.peers.hf_export import convert

    out = convert(args.model, args.out)
    print(f"wrote {out}: config.json, model.safetensors, tokenizer.json, tokenizer_config.json "
          f"(transformers: AutoModelForCausalLM.from_pretrained({str(out)!r}); vLLM: LLM(model={str(out)!r}))")
    return 0
