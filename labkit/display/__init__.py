"""What a person looks at: the dashboard model and widget, plots, figures (every chapter).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
