"""The Keras family's model builder of each workload, one module per workload, named by its declaration
(harness/contract/workloads/<workload>.py, ``builders["keras"]``) and imported by the shared training code
(frameworks.shared.keras.training.model_module) only when a run asks for it. Each defines
``build_model(options) -> keras.Model`` (its variables are made by training.build_model's dummy call where the
workload has a fixed batch), ``model_inputs(batch)`` (what the model is called on) and
``loss_of(model, batch, training) -> scalar tensor``."""
