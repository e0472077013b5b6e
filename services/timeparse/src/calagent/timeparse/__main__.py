from calagent.runtime.service import run
from calagent.timeparse.app import create_app

if __name__ == "__main__":
    run(create_app, "timeparse")
