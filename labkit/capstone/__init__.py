"""The capstone (chapter 16): its subject (the tuning walk, the packed images, the bake-off,
the decision table) is typed in the chapter; nothing of it is left here."""

__all__: list[str] = []
