"""Token pipelines for language models (chapter 11): corpus, windows, documents, packing,
document masks, exact resume."""
