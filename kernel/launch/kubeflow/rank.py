"""The function every rank of a Kubeflow TrainJob runs. The SDK ships its source into the job
(on Kubernetes inside the node container's command, on the local backend in a file its torchrun
starts), so it stands alone: its imports are inside it, and it needs only what the image (or,
locally, the kernel's environment) has installed. It is ``python -m hotswitch.kernel.worker BODY``
for one rank."""


def hotswitch_rank(args=None, **kwargs):
    # The local backend passes one dict, Kubernetes keywords: "body", the body's path; "path",
    # the kernel's import folders, added (with their .pth files: an editable install's among
    # them) on the local backend, whose fresh virtual environment lacks hotswitch; none on
    # Kubernetes, where the image has it. No backquote or dollar sign in this function: the
    # SDK pastes its source into a shell here-document.
    import os
    import site
    import tempfile

    args = args or kwargs
    for folder in args.get("path", []):
        site.addsitedir(folder)
    # A Secret's file in a pod belongs to root and is readable by the pod's user, whoever that
    # is; the worker takes a key only from a file its own user alone can read: copy it so.
    key = os.environ.get("HOTSWITCH_SECRET_FILE")
    if key and (os.stat(key).st_uid != os.getuid() or os.stat(key).st_mode & 0o077):
        descriptor, private = tempfile.mkstemp(prefix="hotswitch-key-")
        with open(key, "rb") as source, os.fdopen(descriptor, "wb") as copy:
            copy.write(source.read())
        os.environ["HOTSWITCH_SECRET_FILE"] = private
    from hotswitch.kernel.worker.entry import main

    status = main([args["body"]])
    if status:
        raise SystemExit(status)
