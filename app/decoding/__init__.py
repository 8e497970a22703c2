"""What a decode is made of, shared by the engine and the drafters: the
model Protocol, the sampling chain and exact acceptance, the grammar
constraint and the schema or GBNF file it is read from, KV cache sync, a turn's rounds and stats, and the cost curve
(measured and kept)."""
