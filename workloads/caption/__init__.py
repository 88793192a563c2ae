"""The thesis's caption model beyond its training: BLEU on held-out images (bleu.py), the saved model that
captions new photos (model.py), and the image features it reads (image_features.py)."""
