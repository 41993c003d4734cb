"""What the compiler tells about a compiled program or model: the explanation (explain), the per-layer
bound (bound), the roofline (roofline), the VTA/host placement of a model's steps (placement) and the
assembly with its story in comments (assembly). Reports read compiled results; nothing below imports them."""
