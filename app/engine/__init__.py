"""The speculative decoding loop: draft, verify in one target pass, accept,
commit, roll back, report; and the text of the committed tokens."""
