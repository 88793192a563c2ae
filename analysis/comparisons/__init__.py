"""An experiment against something else: stored reference results, the thesis, the file's expectations (and their
JUnit document), and a thesis condition against its faithful twin."""
