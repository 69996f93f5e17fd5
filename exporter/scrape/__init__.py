"""What the collector and every collector extension share, below them all: who holds a GPU or a MIG device
(`holders`, with the DRA driver's device names in `dra`) and what one scrape knows besides the snapshot
(`context`: the label values, an empty family per metric, the extension and attribution protocols)."""
