"""Text handling shared by search, memorize and the store: CJK ranges, segmentation, stopwords, stemmers."""
