"""tf_keras' train step with the gradients all-reduced in another dtype, or applied alone (a local step):
shared by the methods that change TensorFlow's all-reduce. TensorFlow is imported inside."""
from __future__ import annotations


AGGREGATE = "aggregate"


def train_step(dtype):
    """tf_keras' train step with the gradients all-reduced in `dtype` (summed, as Keras aggregates them), with
    dtype None applied alone: a local step (the loss Keras scaled by 1/replicas scaled back), or with AGGREGATE
    all-reduced as Keras does. The gradients are those of the loss x the model's `gradient_weight` (a balanced
    worker's share, workloads/balance/; 1 without; a function: called in the replica's context), the loss Keras reports the plain one."""
    import tensorflow as tf
    import tf_keras as keras

    def step(self, data):
        x, y, weight = keras.utils.unpack_x_y_sample_weight(data)
        share = getattr(self, "gradient_weight", 1.0)
        share = share() if callable(share) else float(share)      # a function: the weight in the replica's context
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x, y, y_pred, weight)
            weighted = loss if share is None or (isinstance(share, float) and share == 1.0) else loss * share
        variables = self.trainable_variables
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(weighted, variables)]
        if dtype == AGGREGATE:
            self.optimizer.apply_gradients(zip(grads, variables))
            return self.compute_metrics(x, y, y_pred, weight)
        if dtype is None:
            replicas = float(tf.distribute.get_strategy().num_replicas_in_sync)
            grads = [g * replicas for g in grads]
        else:
            ctx = tf.distribute.get_replica_context()
            summed = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [tf.cast(g, dtype) for g in grads])
            grads = [tf.cast(g, v.dtype) for g, v in zip(summed, variables)]
        self.optimizer.apply_gradients(zip(grads, variables), skip_gradients_aggregation=True)
        return self.compute_metrics(x, y, y_pred, weight)
    return step


def cast_all_reduce(model, dtype_name: str) -> list:
    """Swap in the train step that all-reduces the gradients cast to `dtype_name` (float16, bfloat16)."""
    import types

    import tensorflow as tf

    model.train_step = types.MethodType(train_step(getattr(tf, dtype_name)), model)
    return []
