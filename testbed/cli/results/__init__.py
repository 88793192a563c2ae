"""The verbs that read results folders: report, compare, predict, and caption (a trained caption model)."""
