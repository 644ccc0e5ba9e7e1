"""The PyTorch family's model builder of each workload, one module per workload, named by its declaration
(harness/contract/workloads/<workload>.py, ``builders["pytorch"]``) and imported by the shared training code
(frameworks.shared.pytorch.training.model_module) only when a run asks for it. Each defines
``build_model(options) -> nn.Module`` and ``loss_of(model, batch) -> scalar tensor`` on the fixed batch's keys."""
