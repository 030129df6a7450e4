"""The checks of the classroom assignments (``assignments/``), one module per assignment, and the
clean room that runs them (``cleanroom/``). What must stay true: a grade is computed only in
the clean room's judge, never in the student's process.
"""
