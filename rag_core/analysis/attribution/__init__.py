"""Where an answer came from: each token's source (a passage, several, the weights), each sentence's
worth by leaving it out, and each passage's worth to the stuffed answer."""
